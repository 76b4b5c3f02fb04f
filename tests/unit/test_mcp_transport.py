"""The MCP server's DNS-rebinding protection and advertised URL, from the settings and the bound address."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memora_pg import Settings
from memora_pg.mcp.run import Options, base_url, transport_security


def test_a_proxy_named_in_the_environment_is_allowed_beside_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORA_PG_MCP_ALLOWED_HOSTS", "memory.example.com, memory.internal:*")
    monkeypatch.setenv("MEMORA_PG_MCP_ALLOWED_ORIGINS", "https://app.example.com")
    security = transport_security(Options(Settings()), "127.0.0.1", 8765)
    assert security is not None
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts[:2] == ["memory.example.com", "memory.internal:*"]
    assert "127.0.0.1:*" in security.allowed_hosts
    assert security.allowed_origins[0] == "https://app.example.com"


def test_every_interface_with_no_name_leaves_the_sdk_its_choice() -> None:
    assert transport_security(Options(Settings()), "0.0.0.0", 8765) is None  # noqa: S104


def test_every_interface_with_a_public_url_allows_that_url_only() -> None:
    options = Options(Settings(mcp_public_url="https://memory.example.com/mcp"))
    security = transport_security(options, "0.0.0.0", 8765)  # noqa: S104
    assert security is not None
    assert security.allowed_hosts == ["memory.example.com"]
    assert security.allowed_origins == ["https://memory.example.com"]
    assert base_url(options, "0.0.0.0", 8765) == "https://memory.example.com"  # noqa: S104


def test_a_specific_address_is_allowed_with_its_port() -> None:
    security = transport_security(Options(Settings()), "10.0.0.5", 9000)
    assert security is not None
    assert security.allowed_hosts == ["10.0.0.5:9000"]
    assert security.allowed_origins == ["http://10.0.0.5:9000"]
    ipv6 = transport_security(Options(Settings()), "fd00::5", 9000)
    assert ipv6 is not None
    assert ipv6.allowed_hosts == ["[fd00::5]:9000"]
    assert base_url(Options(Settings()), "fd00::5", 9000) == "http://[fd00::5]:9000"


def test_a_public_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValidationError, match="mcp_public_url"):
        Settings(mcp_public_url="memory.example.com")

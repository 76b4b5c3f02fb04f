"""Between the protocol's ``MemoryContent`` and a stored entry, and the text a model context shows."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from memora_pg.autogen.protocol import AUTOGEN_CORE, Image, MemoryContent, MemoryMimeType
from memora_pg.errors import InvalidInputError
from memora_pg.graph import autogen_contents


def _mismatch(mime_type: str, kind: str, content: object) -> InvalidInputError:
    expected = {"text": "a str", "json": "a dict (or a str holding a JSON object)", "image": "an Image or bytes"}
    return InvalidInputError(
        f"The mime type {mime_type!r} does not match the content: {kind} content must be "
        f"{expected.get(kind, 'bytes')}, not {type(content).__name__}."
    )


def to_entry(content: object) -> tuple[autogen_contents.NewContent, str | None]:
    """Validate a MemoryContent; return the entry to store and the text to embed (None: not searchable)."""
    if not isinstance(content, MemoryContent):
        raise InvalidInputError(f"Memory content must be a MemoryContent, not {type(content).__name__}.")
    mime_type = content.mime_type.value if isinstance(content.mime_type, MemoryMimeType) else content.mime_type
    kind = autogen_contents.mime_kind(mime_type)
    metadata = content.metadata
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInputError(f"`metadata` must be a dict or None, not {type(metadata).__name__}.")
    stored_metadata = json.loads(autogen_contents.canonical_json(metadata, "`metadata`")) if metadata else None
    value = content.content
    if isinstance(value, str):
        if kind == "text":
            text = autogen_contents.check_text(value)
            return autogen_contents.NewContent(mime_type=mime_type, text=text, metadata=stored_metadata), text
        if kind != "json":
            raise _mismatch(mime_type, kind, value)
        # A str with the JSON mime type is accepted when it holds a JSON object, and stored as one.
        try:
            value = json.loads(value)
        except ValueError as error:
            raise InvalidInputError(f"Content with mime type {mime_type!r} is not valid JSON: {error}") from error
        if not isinstance(value, dict):
            raise InvalidInputError("JSON content must be an object (a dict), not another JSON value.")
    if isinstance(value, dict):
        if kind != "json":
            raise _mismatch(mime_type, kind, value)
        text = autogen_contents.canonical_json(value, "JSON content")
        return autogen_contents.NewContent(mime_type=mime_type, json=json.loads(text), metadata=stored_metadata), text
    if isinstance(value, bytes | bytearray):
        if kind in ("text", "json"):
            raise _mismatch(mime_type, kind, value)
        data = autogen_contents.check_bytes(bytes(value))
        return autogen_contents.NewContent(mime_type=mime_type, data=data, metadata=stored_metadata), None
    if AUTOGEN_CORE and isinstance(value, Image):
        if kind != "image":
            raise _mismatch(mime_type, kind, value)
        data = autogen_contents.check_bytes(base64.b64decode(value.to_base64()))  # PNG
        return autogen_contents.NewContent(mime_type=mime_type, data=data, metadata=stored_metadata), None
    raise InvalidInputError(
        f"Unsupported content type {type(value).__name__}: use str (text, markdown), dict (JSON), bytes or an Image."
    )


def mime_out(mime_type: str) -> MemoryMimeType | str:
    try:
        return MemoryMimeType(mime_type)
    except ValueError:
        return mime_type


def _bytes_out(data: bytes, mime_type: str) -> bytes | Image:
    if AUTOGEN_CORE and mime_type.lower().startswith("image/"):
        try:
            return Image.from_base64(base64.b64encode(data).decode("ascii"))
        except Exception:  # bytes that are not a decodable image come back as bytes
            return data
    return data


def to_memory_content(stored: autogen_contents.StoredContent) -> MemoryContent:
    """The entry as the protocol's MemoryContent, with its original Python type restored."""
    value: str | bytes | dict[str, Any] | Image
    if stored.text is not None:
        value = stored.text
    elif stored.json is not None:
        value = stored.json
    else:
        assert stored.data is not None  # the table's check constraint: exactly one content column
        value = _bytes_out(stored.data, stored.mime_type)
    metadata = dict(stored.metadata)
    if stored.score is not None:
        metadata["score"] = stored.score
    if stored.similarity is not None:
        metadata["similarity"] = stored.similarity
    return MemoryContent(content=value, mime_type=mime_out(stored.mime_type), metadata=metadata or None)


def message_text(message: object) -> str | None:
    """The text of a user message (AutoGen's UserMessage, or a dict/object with role "user"), else None."""
    if isinstance(message, Mapping):
        is_user = message.get("role") == "user" or message.get("type") == "UserMessage"
        content = message.get("content")
    else:
        is_user = getattr(message, "type", None) == "UserMessage" or getattr(message, "role", None) == "user"
        content = getattr(message, "content", None)
    if not is_user:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        # AutoGen's multimodal content: str parts and images; the words are the query.
        return "\n".join(part for part in content if isinstance(part, str))
    return ""


def memory_line(content: object) -> str:
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    return str(content)

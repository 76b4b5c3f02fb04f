"""OpenTelemetry spans of memora_pg's calls, printed by the SDK's console exporter.

    python docs/examples/tracing.py

Any exporter works the same way (OTLP to a collector, Jaeger, ...): memora_pg only uses
``opentelemetry-api``; the application configures the SDK.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from memora_pg.mem0 import AsyncMemory

provider = TracerProvider()
provider.add_span_processor(
    SimpleSpanProcessor(ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n"))
)
trace.set_tracer_provider(provider)


async def main() -> None:
    memory = AsyncMemory()
    tracer = trace.get_tracer("example")
    try:
        with tracer.start_as_current_span("agent turn"):
            await memory.add("Prefers trains to planes", user_id="ada", infer=False)
            await memory.search("how does Ada travel?", filters={"user_id": "ada"})
        await memory.delete_all(user_id="ada")
    finally:
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main())

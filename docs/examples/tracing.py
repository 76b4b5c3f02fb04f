"""OpenTelemetry spans of memora_pg's calls, printed by the SDK's console exporter.

    python docs/examples/tracing.py

Any exporter works the same way (OTLP to a collector, Jaeger, ...): memora_pg only uses
``opentelemetry-api``; the application configures the SDK.
"""

from __future__ import annotations

import asyncio
import uuid

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
    user_id = f"example-traveller-{uuid.uuid4().hex[:8]}"  # this run's own user, deleted at the end
    try:
        with tracer.start_as_current_span("agent turn"):
            await memory.add("Prefers trains to planes", user_id=user_id, infer=False)
            await memory.search("does the user prefer trains or planes?", filters={"user_id": user_id})
        await memory.delete_all(user_id=user_id)
    finally:
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main())

"""What the two adapters over the mem0ai library share: `mem0ai` (2.x, in memaudit's environment)
and `mem0_graph` (1.0.x in graph mode, in an environment of its own). Nothing here imports the
library, so the graph adapter's worker, which runs 1.0.x, imports it too."""
from __future__ import annotations

USER = "user"
TELEMETRY = {"MEM0_TELEMETRY": "False"}


def shaped(result: dict) -> dict:
    """A library result (a memory of its vector store) as the published dump wrote it."""
    metadata = result.get("metadata")
    return {"id": result.get("id"), "content": result.get("memory") or "",
            "category": metadata.get("category", "fact") if isinstance(metadata, dict) else "fact",
            "metadata": metadata, "timestamp": result.get("created_at") or result.get("updated_at")}

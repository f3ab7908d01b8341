"""Release I/O in one place: the published layout written (`export`) and read (`import-release`)."""
from memaudit.release.exporter import export_runs
from memaudit.release.importer import import_release

__all__ = ["export_runs", "import_release"]

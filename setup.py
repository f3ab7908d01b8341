"""Build-time layout mapping (everything else is in pyproject.toml).

The repository keeps the design card's top-level folders: adapters/, prompts/, db/. The wheel has
one top-level import package, `memaudit`: adapters/ becomes memaudit/adapters, and prompts/ and
db/ are copied to memaudit/_data/ (found at run time by memaudit/resources.py)."""
from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

DATA_FOLDERS = {"prompts": "*.md", "db": "*.sql"}


class BuildWithData(build_py):
    def run(self):
        super().run()
        for folder, pattern in DATA_FOLDERS.items():
            target = Path(self.build_lib) / "memaudit" / "_data" / folder
            target.mkdir(parents=True, exist_ok=True)
            for source in sorted(Path(folder).glob(pattern)):
                self.copy_file(str(source), str(target / source.name))


setup(
    packages=find_namespace_packages(include=["memaudit", "memaudit.*"], exclude=["*.__pycache__"]) + ["memaudit.adapters"],
    package_dir={"memaudit.adapters": "adapters"},
    cmdclass={"build_py": BuildWithData},
)

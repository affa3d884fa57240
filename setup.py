"""Build hook: ship the top-level data folders inside the wheel as mirage_formal/_data/.

An editable install reads them from the repository root instead (see mirage_formal/resources.py).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_FOLDERS = ("axioms", "search", "codegen")


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in DATA_FOLDERS:
            src = Path(name)
            if src.is_dir():
                dst = Path(self.build_lib, "mirage_formal", "_data", name)
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})

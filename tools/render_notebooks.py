"""Re-run the notebooks as shipped (a dry run) on a demo history, save their outputs in the .ipynb files
so a reader sees them without running anything, and save every chart as docs/notebooks/<notebook>-<n>.png.

    .venv/bin/python tools/render_notebooks.py [--db sqlite:///demo.db]

Without --db it makes a fresh `chokaq demo` history (the defaults: 1200 jobs over 3 days) in a temporary
file. Needs the test extra (nbclient, ipykernel): `make setup-test`, or `make notebook-outputs`.
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SHOTS = ROOT / "docs" / "notebooks"


def render(db_url: str, workdir: Path) -> list[Path]:
    """Run each notebook with its kernel in `workdir` on `db_url` (relative SQLite paths are from there)."""
    os.environ["CHOKAQ_DB"] = db_url
    for name in ("CHOKAQ_API_URL", "CHOKAQ_API_TOKEN", "CHOKAQ_CONFIG"):
        os.environ.pop(name, None)
    os.environ["CHOKAQ_ACTOR"] = "notebook:analyst"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    written: list[Path] = []
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(
            notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
        ).execute()
        n = 0
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                png = output.get("data", {}).get("image/png")
                if png:
                    n += 1
                    shot = SHOTS / f"{path.stem}-{n}.png"
                    shot.write_bytes(base64.b64decode(png))
                    written.append(shot)
        nbformat.write(notebook, path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", help="a demo database URL (default: a fresh `chokaq demo` history)")
    args = parser.parse_args()
    if args.db:
        shots = render(args.db, ROOT / "notebooks")
    else:
        # The outputs show the URL as `sqlite:///demo.db`, as on a reader's machine, not a temporary path.
        with tempfile.TemporaryDirectory() as tmp:
            chokaq = str(Path(sys.executable).with_name("chokaq"))
            subprocess.run([chokaq, "demo", "--db", "sqlite:///demo.db"], check=True, cwd=tmp)
            shots = render("sqlite:///demo.db", Path(tmp))
    for shot in shots:
        print(shot.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())

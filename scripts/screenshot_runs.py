"""Screenshots of the Runs page and the compare view on real runs, at 1600x1000 and 1280x800:
docs/runs.png, docs/compare.png, docs/runs-1280.png, docs/compare-1280.png.

Launches real light-trainer clusters with ``python main.py launch`` into a temporary data dir
(1 ps + 6 workers, one whose worker fails, and two 1 ps + 2 worker runs of one file that differ only
in ``--learning_rate``), then shows the window's Runs page as the app lays it out (nothing resized
here) and a compare of the two runs one flag apart, and grabs both at each size. Run under Xvfb,
from the repo root:
``xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python scripts/screenshot_runs.py docs``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLUSTER = """
name = "{name}"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz={rate}"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{ps}"]
[jobs.worker]
tasks = [{workers}]
restart = "Never"
{extra}
"""


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def launch(
    tmp: Path,
    name: str,
    workers: int,
    steps: int,
    rate: float,
    extra: str = "",
    flags: str = "",
    ports: list[int] | None = None,
) -> None:
    ports = ports or free_ports(workers + 1)
    path = tmp / f"{name}.toml"
    text = CLUSTER.format(
        name=name,
        trainers=ROOT / "resources" / "trainers",
        steps=steps,
        rate=rate,
        ps=ports[0],
        workers=", ".join(f'"127.0.0.1:{p}"' for p in ports[1:]),
        extra=extra,
    )
    path.write_text(text.replace('"--rate_hz=', f'{flags}"--rate_hz=', 1))
    subprocess.run([sys.executable, str(ROOT / "main.py"), "launch", str(path), "--progress-every", "0"], check=False)


SIZES = (((1600, 1000), ""), ((1280, 800), "-1280"))


def main(out_dir: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="shot-runs-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["TOWERDECK_DATA_DIR"] = str(tmp / "data")
        os.environ["TOWERDECK_SETTINGS_DIR"] = str(tmp / "settings")
        launch(tmp, "mnist-6w", 6, 300, 25, flags='"--batch_size=64", "--learning_rate=0.1", ')
        bad = 'command = ["python", "-c", "import sys; print(\'Step: 1,  Cost: 2.5\', flush=True); sys.exit(3)"]'
        launch(tmp, "typo-in-flags", 1, 10, 10, bad)
        same = free_ports(3)  # one file, launched twice: only --learning_rate changed
        for rate in ("0.1", "0.3"):
            launch(tmp, "mnist-2w", 2, 300, 40, flags=f'"--batch_size=64", "--learning_rate={rate}", ', ports=same)

        from PySide6 import QtCore, QtWidgets

        from gui.window.main_window import MainWindow

        app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
        window = MainWindow(None, runs_root=tmp / "data" / "runs")
        window.show()
        page = window.runs_page
        loop = QtCore.QEventLoop()
        page.sig_loaded.connect(lambda _n: loop.quit())
        window.pages.setCurrentWidget(page)
        QtCore.QTimer.singleShot(30_000, loop.quit)
        loop.exec()
        ids = [r.id for r in page.model.runs if r.name == "mnist-2w"]
        page.select_ids(ids)
        page.buttons["Compare"].click()
        view = window.runs.compare_views[-1]
        done = QtCore.QEventLoop()
        view.sig_loaded.connect(done.quit)
        QtCore.QTimer.singleShot(30_000, done.quit)
        if not view.rows:
            done.exec()
        view.only_diff.setChecked(True)
        for (width, height), suffix in SIZES:
            window.resize(width, height)
            view.resize(width, height)
            for _ in range(5):
                app.processEvents()
            window.grab().save(str(out_dir / f"runs{suffix}.png"))
            view.grab().save(str(out_dir / f"compare{suffix}.png"))
            print(f"saved {out_dir / f'runs{suffix}.png'} and {out_dir / f'compare{suffix}.png'}")
        view.close()
        window.answer_close_question("stop")
        window.close()
        app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs"))

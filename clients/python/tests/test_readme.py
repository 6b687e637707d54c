"""README.md's Python examples, run as written (stopped by SIGTERM, as a user would)."""

import os
import re
import signal
import threading
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_work(db_url, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 3
    monkeypatch.setenv("DATABASE_URL", db_url)
    namespace = {"__name__": "readme"}
    exec(compile(blocks[0], "README.md (enqueueing)", "exec"), namespace)
    assert capsys.readouterr().out == "queued\n"
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        exec(compile(blocks[1], "README.md (working)", "exec"), namespace)
    finally:
        timer.cancel()
    assert capsys.readouterr().out == "receipt for order 42 attempt 1\n"
    assert namespace["client"].get(namespace["job_id"])["state"] == "done"
    exec(compile(blocks[2], "README.md (workflows)", "exec"), namespace)
    assert capsys.readouterr().out == "HELLO WORLD (2 words)\n"
    namespace["client"].close()

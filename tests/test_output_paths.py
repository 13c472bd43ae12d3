"""Where `-o` goes: a regular file is replaced atomically, a symlink's target is written (the
link kept), a FIFO, a character device or /dev/stdout is written through (never replaced by
a file), any other node is refused; empty path arguments are refused; and a name's control
characters never reach the terminal raw."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bad_inputs import BASE, REFUSE, _check, _outcome, place

from stepwall.cli import main
from stepwall.core.terminal import visible

__all__ = ["place"]  # the fixture, used by name

SWEEP = ["sweep", BASE, "--vary", "workload.concurrency=1,2", "--format", "csv"]
HEADER = "workload.concurrency,step_time_s [s]"
REPORT = "k26-cluster-scaling"
SEARCH = ["search", "deepseek-v3-fp8", "--hardware", "h200", "--cluster", "hgx-h200-ib",
          "--gpus", "8"]  # fmt: skip


def _reader(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    """A thread that reads ``fifo`` to its end (as a shell pipeline would)."""
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def _finish(fifo: Path, thread: threading.Thread) -> None:
    """Wait for the reader; release it (open and close a writer) if nothing wrote."""
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)


def _device_twin(folder: Path, name: str = "null-twin", minor: int = 3) -> Path:
    """A character device like /dev/null (1, 3) or /dev/full (1, 7) in ``folder``; skipped
    where one cannot be made (not root) or used (a nodev mount)."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    dev = folder / name
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    try:
        os.close(os.open(dev, os.O_WRONLY))
    except PermissionError:
        pytest.skip("device nodes are not usable on this mount (nodev)")
    return dev


def _is(path: Path, test: Callable[[int], bool]) -> bool:
    """Whether the node at ``path`` itself (a link not followed) passes ``test``."""
    return test(os.lstat(path).st_mode)


# ---------------------------------------------------------------- FIFOs


def test_sweep_writes_through_a_fifo(place, capsys, tmp_path) -> None:
    fifo = tmp_path / "grid.fifo"
    os.mkfifo(fifo)
    thread, got = _reader(fifo)
    code, out, err = _outcome([*SWEEP, "-o", str(fifo)], capsys)
    _finish(fifo, thread)
    assert code == 0, err
    assert got and got[0].decode().startswith(HEADER) and got[0].count(b"\n") == 3
    assert _is(fifo, stat.S_ISFIFO), "the FIFO was replaced"
    assert f"wrote {fifo} (2 rows)" in out


def test_explore_writes_through_a_fifo(place, capsys, tmp_path) -> None:
    fifo = tmp_path / "page.fifo"  # no .html: a stream takes any name
    os.mkfifo(fifo)
    thread, got = _reader(fifo)
    code, _, err = _outcome(["explore", BASE, "-o", str(fifo)], capsys)
    _finish(fifo, thread)
    assert code == 0, err
    assert got and got[0].lstrip().lower().startswith(b"<!doctype html")
    assert _is(fifo, stat.S_ISFIFO)


def test_report_onto_a_fifo_is_refused(place, capsys, tmp_path) -> None:
    fifo = tmp_path / "rep"
    os.mkfifo(fifo)
    code, out, err = _outcome(["report", REPORT, "-o", str(fifo)], capsys)
    _check(code, out, err, REFUSE, "is a FIFO", set(), Path(place["work"]))
    assert _is(fifo, stat.S_ISFIFO)


# ---------------------------------------------------------------- symlinks


def test_sweep_follows_a_symlink(place, capsys, tmp_path) -> None:
    target = tmp_path / "target.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    code, _, err = _outcome([*SWEEP, "-o", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target), "the link was replaced"
    assert target.read_text().startswith(HEADER)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aside", "link.csv", "target.csv", "work"]


def test_a_dangling_symlink_gets_its_target_written(place, capsys, tmp_path) -> None:
    link = tmp_path / "link.csv"
    link.symlink_to("new.csv")
    code, _, err = _outcome([*SWEEP, "-o", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and (tmp_path / "new.csv").read_text().startswith(HEADER)


def test_search_follows_a_symlink(place, capsys, tmp_path) -> None:
    target = tmp_path / "front.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = _outcome([*SEARCH, "-o", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and "frontier" in json.loads(target.read_text())


# ---------------------------------------------------------------- devices


def test_sweep_writes_through_a_character_device(place, capsys, tmp_path) -> None:
    dev = _device_twin(tmp_path)
    code, _, err = _outcome([*SWEEP, "-o", str(dev)], capsys)
    assert code == 0, err
    assert _is(dev, stat.S_ISCHR), "the device was replaced by a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aside", "null-twin", "work"]


def test_explore_writes_through_a_character_device(place, capsys, tmp_path) -> None:
    dev = _device_twin(tmp_path)
    code, _, err = _outcome(["explore", BASE, "-o", str(dev)], capsys)
    assert code == 0, err
    assert _is(dev, stat.S_ISCHR)


def test_report_onto_a_character_device_is_refused(place, capsys, tmp_path) -> None:
    dev = _device_twin(tmp_path)
    code, out, err = _outcome(["report", REPORT, "-o", str(dev)], capsys)
    _check(code, out, err, REFUSE, "is a character device", set(), Path(place["work"]))
    assert _is(dev, stat.S_ISCHR)


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="no /dev/full here")
def test_a_full_device_is_one_line_and_stays_a_device(place, capsys, tmp_path) -> None:
    # as root a broken writer could replace the real /dev/full: root writes to a twin
    full = "/dev/full" if os.geteuid() != 0 else str(_device_twin(tmp_path, "full", 7))
    argv = ["sweep", "dsv3-h200-tp8", "--vary", "workload.concurrency=1,2", "--format", "csv",
            "-o", full]  # fmt: skip
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, REFUSE, f"{full}: cannot write: No space left", set(),
           Path(place["work"]))  # fmt: skip
    assert Path(full).is_char_device()


def test_a_socket_is_refused_before_any_work(place, capsys, tmp_path, monkeypatch) -> None:
    from stepwall.apps import sweep

    monkeypatch.chdir(tmp_path)  # a short path: sockets' names are limited to 108 bytes
    with socket.socket(socket.AF_UNIX) as s:
        s.bind("grid.csv")
        monkeypatch.setattr(sweep, "plan_sweep", lambda *a, **k: pytest.fail("work was done"))
        code, out, err = _outcome([*SWEEP, "-o", "grid.csv"], capsys)
        assert code == 2 and "grid.csv: is a socket" in err and out == "", err
        assert _is(tmp_path / "grid.csv", stat.S_ISSOCK)


def test_a_block_device_is_refused(place, capsys, tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    dev = tmp_path / "disk.csv"
    os.mknod(dev, stat.S_IFBLK | 0o600, os.makedev(7, 0))  # never opened
    code, out, err = _outcome([*SWEEP, "-o", str(dev)], capsys)
    _check(code, out, err, REFUSE, "is a block device", set(), Path(place["work"]))
    assert _is(dev, stat.S_ISBLK)


def test_a_report_folder_through_a_symlink_keeps_the_link(tmp_path) -> None:
    from stepwall.io import output

    real = tmp_path / "real"
    output.write_folder(real, {"REPORT.md": b"old"})
    link = tmp_path / "link"
    link.symlink_to(real)
    output.folder_target(str(link))  # a previous report's folder, through its link
    output.write_folder(link, {"REPORT.md": b"new", "a.csv": b"1"})
    assert link.is_symlink() and (real / "REPORT.md").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_a_report_folder_never_replaces_a_fifo(tmp_path) -> None:
    from stepwall.core.errors import SpecError
    from stepwall.io import output

    fifo = tmp_path / "rep"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="is a FIFO"):
        output.write_folder(fifo, {"REPORT.md": b"new"})
    assert _is(fifo, stat.S_ISFIFO) and os.listdir(tmp_path) == ["rep"]


# ---------------------------------------------------------------- /dev/stdout


@pytest.fixture
def stdout_link(tmp_path: Path) -> str:
    """/dev/stdout, or as root (who could lose the real one to a broken writer) a link like
    it: ``stdout`` -> /proc/self/fd/1."""
    if not Path("/dev/stdout").is_symlink():
        pytest.skip("no /dev/stdout here")
    if os.geteuid() != 0:
        return "/dev/stdout"
    twin = tmp_path / "stdout"
    twin.symlink_to(os.readlink("/dev/stdout"))
    return str(twin)


def test_sweep_to_dev_stdout_appears_on_stdout(place, capfd, stdout_link) -> None:
    assert main([*SWEEP, "-o", stdout_link]) == 0
    out, err = capfd.readouterr()
    assert out.startswith(HEADER) and out.count("\n") == 3, out  # the rows, nothing else
    assert err == f"wrote {stdout_link} (2 rows)\n"
    assert Path(stdout_link).is_symlink()


def test_explore_to_dev_stdout_appears_on_stdout(place, capfd, stdout_link) -> None:
    print("before")
    assert main(["explore", BASE, "-o", stdout_link]) == 0
    out, err = capfd.readouterr()
    assert out.startswith("before\n<!DOCTYPE html>") and out.endswith("</html>\n"), out[-200:]
    assert err.startswith(f"wrote {stdout_link} (")
    assert os.listdir(place["work"]) == [] and Path(stdout_link).is_symlink()


# ---------------------------------------------------------------- empty arguments

EMPTY_CASES: list[tuple[str, list[str], str]] = [
    ("sweep-o", [*SWEEP, "-o", ""], "-o: is an empty path"),
    ("explore-free", ["explore", BASE, "--free", ""], "--free: names an empty key"),
    ("explore-free-comma", ["explore", BASE, "--free", "parallel.tp,"], "--free: names an empty"),
    ("explore-o", ["explore", BASE, "-o", ""], "-o: is an empty path"),
    ("report-o", ["report", REPORT, "-o", ""], "-o: is an empty path"),
    ("search-o", [*SEARCH, "-o", ""], "-o: is an empty path"),
    ("search-plot", [*SEARCH, "--plot", ""], "--plot: is an empty path"),
    ("calibrate-o", ["calibrate", "b200", "--data", "x.csv", "-o", ""], "-o: is an empty path"),
    ("calibrate-check-o", ["calibrate", "--check", "-o", ""], "does not go with --check"),
]


@pytest.mark.parametrize(("name", "argv", "fragment"), EMPTY_CASES,
                         ids=[c[0] for c in EMPTY_CASES])  # fmt: skip
def test_an_empty_path_argument_is_refused(name, argv, fragment, place, capsys) -> None:
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, REFUSE, fragment, set(), Path(place["work"]))


# ---------------------------------------------------------------- control characters

NAME = "evil\x1b[31mred\x00nul\x07bel\nnl\u202ertl"
TOML_NAME = json.dumps(NAME)  # a TOML basic string: JSON's escapes are TOML's
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but \n


def test_visible_escapes_controls_and_bidi_only() -> None:
    assert visible("a\x1b[1m\x00\x07\t\r\n\x7f\x85\u202e\u2066é≤") == (
        "a\\x1b[1m\\x00\\x07\\t\\r\\n\\x7f\\x85\\u202e\\u2066é≤"
    )
    assert visible("one\ntwo\x1b", lines=True) == "one\ntwo\\x1b"
    assert RAW.search(visible("".join(map(chr, range(0x20))) + "\x7f\x9f\u2069")) is None


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    """A scenario whose name, model name and file name hold control characters."""
    (tmp_path / "m.toml").write_text(f'from = "kimi-k2.6-int4"\nname = {TOML_NAME}\n')
    path = tmp_path / "sc\x1b[31m\x07\u202e.toml"
    path.write_text(f'from = "{BASE}"\nname = {TOML_NAME}\nmodel = "./m.toml"\n')
    return path


def _clean(out: str) -> str:
    assert RAW.search(out) is None, repr(out[:400])
    return out


def test_eval_text_shows_a_name_escaped(place, capsys, evil) -> None:
    for _ in range(2):  # the second from the point cache
        code, out, err = _outcome(["eval", str(evil)], capsys)
        assert code == 0, err
        assert _clean(out).startswith(f"scenario {visible(NAME)}\n")


def test_eval_json_keeps_a_name_exact(place, capsys, evil) -> None:
    code, out, err = _outcome(["eval", str(evil), "--json"], capsys)
    assert code == 0, err
    assert json.loads(_clean(out))["scenario"] == NAME


@pytest.mark.parametrize("fmt", ["csv", "markdown", "text"])
def test_sweep_prints_no_control_character(fmt, place, capsys, evil) -> None:
    argv = ["sweep", str(evil), "--vary", "parallel.tp=1,8", "--format", fmt]
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err
    assert "parallel.tp" in _clean(out)


def test_eval_csv_and_derive_text_print_no_control_character(place, capsys, evil) -> None:
    for argv in (["eval", str(evil), "--format", "csv"],
                 ["derive", str(evil), "wall", "parallel.tp"]):  # fmt: skip
        code, out, err = _outcome(argv, capsys)
        assert code == 0, err
        _clean(out)
    assert visible(NAME) in out  # derive's heading names the scenario


def test_search_csv_escapes_a_file_name(place, capsys, tmp_path) -> None:
    hw = tmp_path / "hw\x1b[31m\u202e.toml"
    hw.write_text('from = "h200"\n')
    argv = ["search", "deepseek-v3-fp8", "--hardware", str(hw), "--cluster", "hgx-h200-ib",
            "--gpus", "8"]  # fmt: skip
    for extra in ([], ["--format", "csv"], ["--format", "markdown"]):
        code, out, err = _outcome([*argv, *extra], capsys)
        assert code == 0, err
        assert visible(str(hw)) in _clean(out)


def test_an_error_shows_a_key_escaped(place, capsys) -> None:
    code, out, err = _outcome(["eval", BASE, "--set", "parallel.t\x1bp=8"], capsys)
    assert code == 2 and out == ""
    assert "parallel.t\\x1bp" in err and RAW.search(err) is None, err

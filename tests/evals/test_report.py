"""`kport report`: report.md and one self-contained report.html of a real eval run, the HTML
rendered in real headless Chromium and its screenshot checked; --compare with a second run;
clear errors (exit 2, file and line named) for missing or malformed run folders."""

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.evals.eval_fixtures import kport

pytestmark = pytest.mark.slow  # an eval run and headless Chromium (tests/tiers.py)

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and
                 Path(p).is_file()), None)


def read_png(path: Path) -> np.ndarray:
    """An 8-bit RGB/RGBA PNG as an (h, w, channels) array: zlib and the five row filters."""
    data, pos, idat = path.read_bytes(), 8, b""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
        idat += body if kind == b"IDAT" else b""
        pos += 12 + n
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * bpp)
    img = np.zeros((h, w * bpp), np.uint8)
    prev = np.zeros(w * bpp, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:
            cur = np.cumsum(line.reshape(w, bpp), axis=0).ravel() % 256
        elif f == 2:
            cur = (line + prev) % 256
        else:  # average and Paeth depend on the byte just decoded: byte by byte
            cur, b = line.tolist(), prev.tolist()
            for i in range(w * bpp):
                left = cur[i - bpp] if i >= bpp else 0
                if f == 3:
                    cur[i] = (cur[i] + (left + b[i]) // 2) % 256
                else:
                    up_left = b[i - bpp] if i >= bpp else 0
                    p = left + b[i] - up_left
                    pa, pb, pc = abs(p - left), abs(p - b[i]), abs(p - up_left)
                    pred = left if pa <= pb and pa <= pc else b[i] if pb <= pc else up_left
                    cur[i] = (cur[i] + pred) % 256
            cur = np.array(cur, np.int32)
        img[y], prev = cur, np.asarray(cur, np.int32)
    return img.reshape(h, w, bpp)


@pytest.fixture(scope="module")
def reported(offline_run, tmp_path_factory):
    """(report folder, completed `kport report`) of the offline run."""
    out = tmp_path_factory.mktemp("report")
    proc = kport("report", str(offline_run[0]), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


def test_report_writes_markdown_and_one_self_contained_html(reported):
    out, proc = reported
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert str(out / "report.html") in proc.stdout and "correct 100% (4)" in proc.stdout
    for text in (md, page):
        assert "Success by category" in text and "elementwise" in text and "reduction" in text
        assert "001_saxpy" in text and "006_sum_partials" in text
        assert "No speedups: Apple GPU timings exist only on Apple Silicon" in text
    assert page.count("<svg") == 2  # success by category, time per case
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert "https://" not in page and "src=" not in page  # nothing fetched


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)")
def test_the_html_renders_in_headless_chromium(reported, tmp_path):
    shot = tmp_path / "report.png"
    proc = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox",
                           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                           "--window-size=1200,1600",
                           (reported[0] / "report.html").resolve().as_uri()],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert shot.is_file(), proc.stderr[-2000:]
    img = read_png(shot)
    assert img.shape[:2] == (1600, 1200)
    colours = np.unique(img[..., :3].reshape(-1, 3), axis=0)
    assert len(colours) > 50  # text, bars and tables, not a blank page
    green = (img[..., 0] == 0x2e) & (img[..., 1] == 0x7d) & (img[..., 2] == 0x32)
    assert green.sum() > 2000  # the "correct" bars were drawn


def test_compare_sets_both_runs_side_by_side(offline_run, tmp_path):
    other = tmp_path / "after"
    shutil.copytree(offline_run[0], other)
    recs = [json.loads(x) for x in (other / "results.jsonl").read_text().splitlines()]
    for r in recs:
        if r["case"] == "005_bias_add_rows":
            r.update(correct=False, wall_s=42.5, reasons=["wrong result: made up"])
    (other / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    proc = kport("report", str(other), "--compare", str(offline_run[0]), "--out",
                 str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    assert "correct 75% (3)" in proc.stdout and "correct 100% (4)" in proc.stdout
    md = (tmp_path / "cmp" / "report.md").read_text()
    assert "| correct | 75% | 100% |" in md
    row = next(x for x in md.splitlines() if x.startswith("| 005_bias_add_rows | no | yes"))
    assert "| 42.5 |" in row and row.endswith("| fixed |")
    page = (tmp_path / "cmp" / "report.html").read_text()
    assert "A vs B" in page and page.count("<svg") == 3


def test_bad_run_folders_are_usage_errors_naming_file_and_line(offline_run, tmp_path):
    proc = kport("report", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "no such folder" in proc.stderr
    run = tmp_path / "run"
    shutil.copytree(offline_run[0], run)
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    proc = kport("report", str(run))
    assert proc.returncode == 2 and "results.jsonl line 2: not JSON" in proc.stderr
    (run / "run.json").write_text("{\n  \"settings\": \n")
    proc = kport("report", str(run))
    assert proc.returncode == 2 and "run.json line 3: not JSON" in proc.stderr
    (run / "run.json").unlink()
    proc = kport("report", str(run))
    assert proc.returncode == 2 and "run.json: missing" in proc.stderr
    assert "Traceback" not in proc.stderr

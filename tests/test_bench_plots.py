"""Bench pictures: valid PNGs of the expected size, identical bytes for the same record, with or without an
operating point."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from infra.offline.bench.plots import goodput_plot, latency_plot, server_plot

from .test_bench_record import CURVE, record, rp

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"  # the first chunk of every PNG
    assert data.endswith(b"IEND\xaeB`\x82")  # the last chunk, with its fixed CRC
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("draw", [latency_plot, goodput_plot, server_plot])
def test_plots_are_valid_deterministic_pngs(tmp_path: Path, draw):
    rec = record(CURVE)
    a = draw(rec, tmp_path / "a" / "plot.png")
    b = draw(rec, tmp_path / "b.png")
    assert png_size(a) == (800, 700)  # FIGSIZE 8 x 7 in at 100 dpi
    assert a.read_bytes() == b.read_bytes()


def test_plots_without_operating_point(tmp_path: Path):
    rec = record([rp(1, 2000, 0.9), rp(2, 3000, 0.6)])
    assert rec.operating_point is None
    for draw in (latency_plot, goodput_plot, server_plot):
        assert png_size(draw(rec, tmp_path / f"{draw.__name__}.png")) == (800, 700)


@pytest.mark.parametrize("draw", [latency_plot, goodput_plot, server_plot])
def test_points_sit_at_their_achieved_rate(tmp_path: Path, draw):
    # The same measurements, 1 req/s offered in both; achieved 1.0 (108 arrivals in 108 s) or 1.05 (113): the x axis
    # is the achieved load, so the pictures differ.
    on = record([rp(1, 400, 1.0), rp(2, 700, 1.0)])
    off = record([rp(1, 400, 1.0, arrivals=113), rp(2, 700, 1.0)])
    assert on.curve[0].achieved_rps == 1.0 and off.curve[0].achieved_rps == pytest.approx(113 / 108)
    assert draw(on, tmp_path / "on.png").read_bytes() != draw(off, tmp_path / "off.png").read_bytes()


# ---- the capacity page's picture ----------------------------------------------------------------------------

REPO = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "bench"
DOCS_RECORD = FIXTURES / "dev-copy-cpu-tiny.json"
DOCS_PICTURE = FIXTURES / "dev-copy-cpu-tiny-latency.png"
#: The page that shows it ("Measuring a release"); its sentence about the record is generated from DOCS_RECORD.
DOCS_PAGE = REPO / "docs" / "capacity.md"


def test_the_docs_picture_is_the_latency_plot_of_its_stored_record(tmp_path: Path):
    """docs/capacity.md shows a real bench run (tests/integration/test_bench_real.py, the dev stack copy on the CPU
    vLLM): its picture must be exactly what ``latency_plot`` draws from the record stored beside it, and the page
    must say what was measured."""
    from infra.offline import docs
    from infra.offline.bench.record import load_measurement

    rec = load_measurement(DOCS_RECORD)
    assert rec.engine_args.served_reason  # a CPU-adapted server, and the record says so
    assert latency_plot(rec, tmp_path / "latency.png").read_bytes() == DOCS_PICTURE.read_bytes()
    assert docs.BENCH_EXAMPLE == DOCS_RECORD  # the page's generated sentence describes this record
    page = DOCS_PAGE.read_text()
    assert f"](../{DOCS_PICTURE.relative_to(REPO).as_posix()})" in page
    assert "tiny" in page[page.index(DOCS_PICTURE.name) - 1200 : page.index(DOCS_PICTURE.name)]

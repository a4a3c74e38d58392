"""Architecture facts load, every figure names a source, and rooflines use them."""

import pytest

from kb.arch import ArchError, chip, chips, features, roofline_seconds


def test_every_chip_and_feature_names_its_sources():
    assert len(chips()) >= 20 and len(features()) >= 20
    for c in chips():
        assert c.sources, c.name
    for f in features():
        assert f.sources, f.id


def test_figures_are_plausible():
    for c in chips():
        if c.bandwidth_gbs is not None:
            assert 50 <= c.bandwidth_gbs <= 1000, c
        if c.fp32_tflops is not None:
            assert 0.5 <= c.fp32_tflops <= 40, c


def test_threadgroup_memory_and_simd_width_facts_are_there():
    facts = {f.id: f.fact for f in features()}
    assert "32 KB" in facts["F3"] and "32 threads" in facts["F1"]
    assert "device memory" in facts["F13"]


def test_roofline_is_the_slower_of_bandwidth_and_compute():
    m1 = chip("m1")
    # 68.25 GB/s: 68.25 GB takes one second; 2.62 TFLOP takes one second.
    assert roofline_seconds(m1, 68.25e9, 0) == pytest.approx(1.0)
    assert roofline_seconds(m1, 0, 2.62e12) == pytest.approx(1.0)
    assert roofline_seconds(m1, 68.25e9, 5.24e12) == pytest.approx(2.0)


def test_unknown_chip_and_unpublished_peaks_are_clear_errors():
    with pytest.raises(ArchError, match="unknown chip 'M9'"):
        chip("M9")
    with pytest.raises(ArchError, match="no published"):
        roofline_seconds(chip("M5"), 1e9, 1e9)

"""Architecture facts load, every figure names a source, and rooflines use them."""

import pytest

from kb.arch import (
    ARCH_DIR,
    ArchError,
    chip,
    chips,
    families,
    family,
    family_of_chip,
    features,
    msl_for_macos,
    msl_versions,
    roofline_seconds,
)


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


FAMILIES = ("Apple7", "Apple8", "Apple9", "Apple10")


def test_one_family_per_generation_with_the_reference_figures():
    fams = {f.name: f for f in families()}
    assert tuple(fams) == FAMILIES
    for f in fams.values():
        assert f.simd_width.value == 32 and f.max_threads_per_threadgroup.value == 1024
        assert f.threadgroup_memory_bytes.value == 32768
        assert f.fp64.value is False and f.atomic_float_threadgroup.value is False
        assert f.simdgroup_matrix.value is True and f.atomic_float_device.value is True
    assert [fams[n].bfloat.value for n in ("Apple7", "Apple8")] == ["emulated", "emulated"]
    assert [f.atomic_64bit.value for f in fams.values()] == ["none", "ulong min/max", "all", "all"]
    assert [f.mma_16x16.value for f in fams.values()] == [False, False, False, True]
    assert [f.simd_shift_fill.value for f in fams.values()] == [False, True, True, True]
    assert [f.dynamic_caching.value for f in fams.values()] == [False, False, True, True]


def test_every_figure_is_sourced_from_known_keys_or_marked_unconfirmed():
    known = {f.id for f in features()} | {s for c in chips() for s in c.sources} | {
        s for f in features() for s in f.sources} | {"MLX-dev", "FST", "AI-M3", "M5", "M5PM"}
    for f in families():
        assert set(f.sources) <= known, f.name
        for key, fig in f.figures().items():
            assert fig.sources or fig.unconfirmed, (f.name, key)
            assert set(fig.sources) <= known, (f.name, key, fig.sources)
    for m in msl_versions():
        assert m.sources or m.unconfirmed, m


def test_unconfirmed_flags_survive_loading():
    fams = {f.name: f for f in families()}
    assert fams["Apple10"].unconfirmed  # Apple10 = M5/A19 is not from the enum page
    assert "bfloat" in fams["Apple9"].unconfirmed_figures()  # native bf16 ALUs on M3+
    assert {"bfloat", "dynamic_caching"} <= set(fams["Apple10"].unconfirmed_figures())
    assert not fams["Apple7"].unconfirmed_figures()
    assert msl_for_macos(13).unconfirmed and not msl_for_macos(14).unconfirmed


def test_every_chip_maps_to_a_family():
    for c in chips():
        assert family_of_chip(c.name).name == c.family
    assert family_of_chip("m2 max").name == "Apple8" and family("apple9").name == "Apple9"
    with pytest.raises(ArchError, match="unknown GPU family 'Apple3'"):
        family("Apple3")


def test_msl_version_by_macos():
    assert [(m.macos, m.version) for m in msl_versions()] == [
        (13, "3.0"), (14, "3.1"), (15, "3.2"), (26, "4.0"), (27, "4.1")]
    assert msl_for_macos(16).version == "3.2" and msl_for_macos(30).version == "4.1"
    with pytest.raises(ArchError, match="no MSL version"):
        msl_for_macos(12)


@pytest.mark.parametrize("edit, key", [
    (("value = 32,", 'value = "32",'), "simd_width.value"),
    (('value = "emulated"', 'value = "slow"'), "bfloat.value"),
    (('fp64 = { value = false, sources = ["F11"] }', "fp64 = { value = false }"), "fp64"),
    (('simd_width = { value = 32, sources = ["F1"] }\n', ""), "simd_width"),
    (("simd_reductions = {", "simd_reduction = {"), "simd_reductions"),
    (("dynamic_caching = {", "colour = 1\ndynamic_caching = {"), "colour"),
])
def test_family_loader_errors_name_file_family_and_key(tmp_path, edit, key):
    text = (ARCH_DIR / "families.toml").read_text()
    (tmp_path / "families.toml").write_text(text.replace(*edit, 1))
    with pytest.raises(ArchError) as err:
        families(tmp_path)
    msg = str(err.value)
    assert "families.toml" in msg and "family Apple7" in msg and f"key `{key}`" in msg, msg


def test_a_family_defined_twice_is_refused(tmp_path):
    text = (ARCH_DIR / "families.toml").read_text()
    start = text.index("[[family]]")
    first = text[start:text.index("[[family]]", start + 1)]
    (tmp_path / "families.toml").write_text(text + "\n" + first)
    with pytest.raises(ArchError, match="Apple7 is defined twice"):
        families(tmp_path)

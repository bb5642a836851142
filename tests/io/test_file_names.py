"""io/file_names.py: view names to file names, unique within a split and the same in every run."""

from __future__ import annotations

from pointrix_lite.io.file_names import MAX_STEM, name_hash, safe_stem, unique_stems


def test_safe_names_stay_as_they_are():
    assert unique_stems(["r_000", "r_001", "IMG-4.2"]) == {"r_000": "r_000", "r_001": "r_001", "IMG-4.2": "IMG-4.2"}


def test_names_the_replacement_changed_keep_their_readable_part_and_a_hash_of_the_original():
    stems = unique_stems(["a b", "a?b", "a_b", "dir/x"])
    assert stems == {
        "a b": f"a_b-{name_hash('a b')}",
        "a?b": f"a_b-{name_hash('a?b')}",
        "a_b": "a_b",
        "dir/x": f"dir_x-{name_hash('dir/x')}",
    }
    assert name_hash("a b") == "7dbde935"  # SHA-1's first 8 hex digits: the same on every machine and run
    assert safe_stem("a b") == stems["a b"]  # the same whatever else the split holds: stable across runs


def test_stems_that_still_meet_take_the_hash_case_folded():
    stems = unique_stems(["x.png", "x", "A", "a", "keep"])
    assert stems["x.png"] == f"x-{name_hash('x.png')}" and stems["x"] == f"x-{name_hash('x')}"
    assert stems["A"] == f"A-{name_hash('A')}" and stems["a"] == f"a-{name_hash('a')}"
    assert stems["keep"] == "keep"
    assert len({s.casefold() for s in stems.values()}) == 5


def test_a_view_named_like_another_views_hashed_name():
    literal = f"a_b-{name_hash('a b')}"
    stems = unique_stems(["a b", literal])
    assert len({s.casefold() for s in stems.values()}) == 2


def test_empty_dotted_and_long_names():
    assert safe_stem("") == f"-{name_hash('')}" and safe_stem("..") == f"..-{name_hash('..')}"
    long = "v" * 300
    assert safe_stem(long) == "v" * MAX_STEM + f"-{name_hash(long)}"

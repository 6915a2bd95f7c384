"""Trace files: the Mooncake JSONL and Azure CSV layouts read into frozen records; a bad
file refused on one line naming the file, the line and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.errors import UsageError
from tuner.limits import MAX_TOKENS
from tuner.loadgen.trace import TraceRecord, parse_trace, read_trace

pytestmark = pytest.mark.unit
TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def _jsonl(*objs) -> list[str]:
    return [json.dumps(o) + "\n" for o in objs]


def test_mooncake_lines_become_records_with_offsets_in_seconds():
    lines = _jsonl({"timestamp": 27482, "input_length": 655, "output_length": 52,
                    "hash_ids": [46, 47]},
                   {"timestamp": 27482, "input_length": 672, "output_length": 26},
                   {"timestamp": 30000.5, "input_length": 9, "output_length": 1,
                    "hash_ids": [46]})
    got = parse_trace(["\n", *lines], "t.jsonl")
    assert got == (TraceRecord(0.0, 655, 52, (46, 47)), TraceRecord(0.0, 672, 26, ()),
                   TraceRecord(pytest.approx(2.5185), 9, 1, (46,)))


def test_the_azure_fixture_reads_with_100ns_ticks_cut_to_microseconds():
    got = read_trace(TRACES / "azure-sample.csv")
    assert [r.input_tokens for r in got] == [374, 1189, 96, 2048, 517, 803]
    assert [r.output_tokens for r in got] == [44, 215, 12, 301, 7, 128]
    assert [r.arrival_s for r in got] == pytest.approx([0.0, 0.23175, 0.31941, 1.56941,
                                                        1.56941, 4.0], abs=1e-6)
    assert all(r.hash_ids == () for r in got)


def test_azure_rows_with_a_utc_offset_read_as_the_same_instant():
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens",
            "2024-05-10 00:00:00.009930+00:00,10,2", "2024-05-10 02:00:01+02:00,5,3"]
    got = [r.arrival_s for r in parse_trace(rows, "a.csv")]
    assert got == pytest.approx([0, 0.99007], abs=1e-6)


@pytest.mark.parametrize("line, reason", [
    ("{not json", "line 2: not JSON"),
    ("[1, 2]", "line 2: not a JSON object"),
    ('{"timestamp": 5, "output_length": 3}', "line 2: no 'input_length'"),
    ('{"timestamp": -1, "input_length": 3, "output_length": 3}', "line 2: timestamp -1"),
    ('{"timestamp": NaN, "input_length": 3, "output_length": 3}', "line 2: timestamp nan"),
    ('{"timestamp": 5, "input_length": 0, "output_length": 3}', "line 2: input_length 0"),
    ('{"timestamp": 5, "input_length": 3, "output_length": 2.5}', "output_length 2.5"),
    (f'{{"timestamp": 5, "input_length": {MAX_TOKENS + 1}, "output_length": 3}}',
     f"input_length {MAX_TOKENS + 1}"),
    ('{"timestamp": 5, "input_length": 3, "output_length": 3, "hash_ids": [1, "a"]}',
     "hash_ids is not a list of integers"),
    ('{"timestamp": 5, "input_length": 2, "output_length": 3, "hash_ids": [1, 2, 3]}',
     "3 hash_ids for a prompt of 2 tokens"),
])
def test_a_bad_mooncake_line_is_refused_naming_file_line_and_reason(line, reason):
    first = '{"timestamp": 10, "input_length": 3, "output_length": 3}'
    with pytest.raises(UsageError) as e:
        parse_trace([first, line, first], "bad.jsonl")
    assert str(e.value).startswith("bad.jsonl: ") and reason in str(e.value)
    assert "\n" not in str(e.value) and e.value.exit_code == 2


@pytest.mark.parametrize("row, reason", [
    ("2023-11-16 18:15:47,12", "line 3: 2 columns, not 3"),
    ("yesterday,12,3", "line 3: TIMESTAMP 'yesterday' is not a date-time"),
    ("2023-11-16 18:15:47,12,x", "line 3: GeneratedTokens 'x' is not a whole number"),
    ("2023-11-16 18:15:47,12,0", "line 3: GeneratedTokens 0 is not a whole number of tokens"),
    ("2023-11-16 18:15:45,12,3", "line 3: timestamp goes back in time"),
])
def test_a_bad_azure_row_is_refused_naming_file_line_and_reason(row, reason):
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46,10,2", row,
            "2023-11-16 18:15:49,10,2"]
    with pytest.raises(UsageError, match=f"^a.csv: {reason}"):
        parse_trace(rows, "a.csv")


@pytest.mark.parametrize("lines, reason", [
    ([], "empty trace"),
    (["hello,world"], "line 1: neither a Mooncake JSON object nor the Azure header"),
    (['{"timestamp": 0, "input_length": 3, "output_length": 3}'], "at least two requests"),
    (['{"timestamp": 7, "input_length": 3, "output_length": 3}'] * 3, "at least two requests"),
])
def test_a_file_that_is_no_replayable_trace_is_refused(lines, reason):
    with pytest.raises(UsageError, match=reason):
        parse_trace(lines, "x")


def test_a_file_saved_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_text((TRACES / "azure-sample.csv").read_text(), encoding="utf-8-sig")
    assert read_trace(path) == read_trace(TRACES / "azure-sample.csv")


def test_an_unreadable_file_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(UsageError, match="nope.jsonl: cannot read the trace"):
        read_trace(tmp_path / "nope.jsonl")
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b'\xff\xfe{"timestamp": 0}\n')
    with pytest.raises(UsageError, match="b.jsonl: line 1: not a text file"):
        read_trace(binary)

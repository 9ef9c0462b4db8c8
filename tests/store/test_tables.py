import numpy as np
import pandas as pd
import pytest

from headlab.store import append_part, drop_parts_after, head_metric_rows, head_pair_rows, read_table
from headlab.store.tables import HEAD_METRIC_COLUMNS, HEAD_PAIR_COLUMNS, ROLE_NAME


def _layers(step):
    return [{"entropy": np.array([0.1, 0.2]) + step, "prev_score": np.array([0.9, 0.0])},
            {"entropy": np.array([1.0, 2.0]) + step, "prev_score": np.array([0.5, 0.5])}]


def test_head_metric_rows_long_format():
    df = head_metric_rows("r1", 30, 2, _layers(0))
    assert tuple(df.columns) == HEAD_METRIC_COLUMNS  # no role rows: no role_name column (LM and importance tables)
    assert len(df) == 2 * 2 * 2
    row = df[(df.layer == 1) & (df["head"] == 1) & (df.metric == "entropy")]
    assert row.value.item() == 2.0 and row.step.item() == 30 and row.epoch.item() == 2


def test_head_pair_rows_index_matrix_entries():
    m = np.arange(9, dtype=float).reshape(3, 3)
    df = head_pair_rows("r", 0, 0, [{"js": m}])
    assert tuple(df.columns) == HEAD_PAIR_COLUMNS
    got = df.pivot(index="head_a", columns="head_b", values="value").to_numpy()
    np.testing.assert_array_equal(got, m)


def test_parts_read_back_as_one_table_and_pandas_reads_the_folder(tmp_path):
    table = tmp_path / "head_metrics.parquet"
    for step in (0, 10, 20):
        append_part(table, step, head_metric_rows("r", step, 0, _layers(step)))
    df = read_table(table)
    assert sorted(df.step.unique()) == [0, 10, 20]
    assert len(df) == 3 * 8
    direct = pd.read_parquet(table)  # any parquet reader sees one dataset
    assert len(direct) == len(df)


def _role_layers():
    # ROLES: 0 previous_token, 4 vertical, 7 sink, 8 content; role@task and role@y are roles too, role_x is not
    return [{"entropy": np.array([0.5, 0.7]), "role": np.array([4.0, 8.0]), "role@task": np.array([0.0, 7.0]),
             "role@y": np.array([8.0, 8.0]), "role_x": np.array([4.0, 4.0])}]


def _names(df, metric):
    return [None if pd.isna(n) else n for n in df[df.metric == metric].sort_values("head")[ROLE_NAME]]


def test_role_rows_store_the_role_name_beside_its_id(tmp_path):
    table = tmp_path / "head_metrics.parquet"
    append_part(table, 0, head_metric_rows("r", 0, 0, _role_layers()))
    direct = pd.read_parquet(table)  # what a user's pandas sees, without headlab
    assert tuple(direct.columns) == (*HEAD_METRIC_COLUMNS, ROLE_NAME)
    assert _names(direct, "role") == ["vertical", "content"]
    assert _names(direct, "role@task") == ["previous_token", "sink"]
    assert _names(direct, "role@y") == ["content", "content"]
    assert direct[direct.metric.isin(["entropy", "role_x"])][ROLE_NAME].isna().all()
    assert direct[direct.metric == "role"].sort_values("head").value.tolist() == [4.0, 8.0]  # ids stay for numeric readers


def test_an_old_table_without_names_is_named_from_its_ids_on_read(tmp_path):
    """Runs written before the name column (and parts appended without it, e.g. headlab-llc's rows) read with names."""
    table = tmp_path / "head_metrics.parquet"
    old = head_metric_rows("r", 0, 0, _role_layers()).drop(columns=ROLE_NAME)
    old.loc[(old.metric == "role") & (old["head"] == 1), "value"] = 99.0  # an id no role has: no name, not a crash
    append_part(table, 0, old)
    append_part(table, 10, head_metric_rows("r", 10, 0, _role_layers()))
    df = read_table(table)
    assert _names(df[df.step == 0], "role") == ["vertical", None]
    assert _names(df[df.step == 0], "role@task") == ["previous_token", "sink"]
    assert _names(df[df.step == 10], "role") == ["vertical", "content"]
    assert df[df.metric == "entropy"][ROLE_NAME].isna().all()


def test_drop_parts_after_step_for_resume(tmp_path):
    table = tmp_path / "t"
    for step in (0, 10, 20, 30):
        append_part(table, step, head_metric_rows("r", step, 0, _layers(step)))
    assert drop_parts_after(table, 10) == 2
    assert sorted(read_table(table).step.unique()) == [0, 10]
    assert drop_parts_after(tmp_path / "missing", 0) == 0


def test_same_step_twice_gets_a_second_part_not_an_overwrite(tmp_path):
    append_part(tmp_path, 5, head_metric_rows("r", 5, 0, _layers(0)))
    append_part(tmp_path, 5, head_metric_rows("r", 5, 1, _layers(1)))
    assert len(read_table(tmp_path)) == 16


def test_read_table_on_empty_folder_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no measurement parts"):
        read_table(tmp_path)


def test_a_truncated_part_is_one_data_error_naming_it(tmp_path):
    from headlab.errors import DataError

    table = tmp_path / "head_metrics.parquet"
    for step in (0, 10):
        last = append_part(table, step, head_metric_rows("r", step, 0, _layers(step)))
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # a copy cut short
    with pytest.raises(DataError) as err:
        read_table(table)
    assert str(err.value).startswith(f"{last}: cannot be read: truncated or not a parquet file (")
    assert "\n" not in str(err.value)

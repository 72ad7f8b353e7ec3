"""Local outputs of an evaluation, written before anything is sent to a tracking server: ``write.py`` (the
folder's files from a result), ``csvtext.py`` (the CSV files' text), ``folder.py`` (the folder's atomic publish,
its manifest, reading it back, its lock)."""

from ..spec import system_file_stem
from .csvtext import FEW_VALUES_MIN_ROWS, FLOAT_FORMAT, csv_lines
from .folder import (
    MANIFEST,
    MANIFEST_VERSION,
    RUN_KEY,
    WRITTEN_BY,
    ResultFolder,
    check_run_key,
    check_target,
    folder_lock,
    lock_path,
    read_result_folder,
    refuse_non_folder,
    staged_folder,
    verify_folder,
    write_manifest,
)
from .write import (
    DEFAULT_ROOT,
    bootstrap_table,
    new_output_dir,
    per_query_home,
    previous_per_query,
    remove_per_query,
    top_lines,
    top_table,
    write_outputs,
)

__all__ = [
    "DEFAULT_ROOT",
    "FEW_VALUES_MIN_ROWS",
    "FLOAT_FORMAT",
    "MANIFEST",
    "MANIFEST_VERSION",
    "RUN_KEY",
    "WRITTEN_BY",
    "ResultFolder",
    "bootstrap_table",
    "check_run_key",
    "check_target",
    "csv_lines",
    "folder_lock",
    "lock_path",
    "new_output_dir",
    "per_query_home",
    "previous_per_query",
    "read_result_folder",
    "refuse_non_folder",
    "remove_per_query",
    "staged_folder",
    "system_file_stem",
    "top_lines",
    "top_table",
    "verify_folder",
    "write_manifest",
    "write_outputs",
]

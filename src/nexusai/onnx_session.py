"""onnxruntime's session settings, shared by what runs on it: the embedders' graphs and
the learned ranker's trees."""

from __future__ import annotations

from typing import Any


def session_options(threads: int) -> Any:
    """onnxruntime options for a turn's embedding: a few threads that do not spin. Idle
    threads spin for a while after each run by default, and on a few cores they take the
    CPU from the rest of the turn (the vector and entity searches, the response):
    /context through HTTP went from 17.0 / 31.5 ms p50 / p95 to 9.8 / 12.1 at 10,000
    episodes without it. Batch throughput is unchanged."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options

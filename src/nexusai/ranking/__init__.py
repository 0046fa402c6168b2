"""The learned ranker: what a turn's candidates look like to it (`features`), the model
that scores them (`model`), and its trees as onnxruntime runs them (`onnx_trees`). No I/O
beyond reading the model file."""

"""The learned ranker: what a turn's candidates look like to it (`features`), and the model
that scores them (`model`). Pure: numpy, no I/O beyond reading the model file."""

// Tests for this target live in this folder, one file per suite.

"""Checking a row: tolerances, chunked comparison against the float64 reference, inputs, the row's gates."""

"""Deciding: the one pipeline every case takes (pipeline.py), the prediction request, execution, comparison, failure text."""

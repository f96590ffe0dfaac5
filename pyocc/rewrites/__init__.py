"""Rewrite passes over dnn IR: memory-op insertion, fusion, coalescing, pools."""

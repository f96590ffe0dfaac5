"""Tools for testing pyocc and compilers like it: random graphs, differential runs."""

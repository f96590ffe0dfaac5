"""Small example models, built in code, that the tutorial and the tests use."""

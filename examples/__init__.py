"""Runnable examples of Dogs for Python (each is a script with a ``main()``).

A package only so that the test suite can import them (``tests/test_examples.py``).
"""

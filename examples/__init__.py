"""Methods written outside raysfl against its public API (``raysfl.api``); one folder each."""

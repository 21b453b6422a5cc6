"""HTML pages of the public mirror (SPEC 9, "HTML pages for people"); the app is
ledger.http.server."""

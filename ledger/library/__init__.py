"""The public library (SPEC 10 "Library"): a consumer's question, "may I launch this kernel
under my rules?", answered by one call. The public names are ``ledger.__all__``; the modules here
are the implementation:

* ``evidence``: the evidence and checks ``ledger verify`` and the library share;
* ``logs``: a read-only log behind one interface (a local ledger, a ``ledger serve`` URL, a
  static mirror written by ``ledger publish``);
* ``certificate``: the frozen ``Certificate`` a verification returns, and the policy's rules;
* ``verifier``: ``Verifier(policy, log).verify(ref)``;
* ``cache``, ``loaders``, ``lockfile``: the verified cache, ``load_ptx``/``load_cupy``, lock files;
* ``public``: ``load_policy`` as the library offers it.

``NAME@VERSION`` lookups are ``ledger.kernels`` (shared with the server and the CLI), the one
partial line ``ledger.core.verdict`` (shared with the web pages).

This is the one part of ``ledger`` (besides the shell) that imports the verifier ``verify``.
"""

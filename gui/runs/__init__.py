"""Past runs: ``runs_page`` (the browser), ``compare``, ``exporting``."""

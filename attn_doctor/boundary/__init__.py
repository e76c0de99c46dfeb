"""Data crossing the doctor's boundary: what comes in (inputs: the files users hand it, reports,
configs, logs, read within bounds: regular files or stdin, a size limit, no endless reads) and what
goes out (redact: what of the environment may appear in a report, an allow-list with redaction on
top). The ground floor: imports nothing else of the package."""

// Crash report parsing and address-to-symbol resolution (issue 5) live in this target.

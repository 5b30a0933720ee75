"""The `archprobe` command line, one shell for every command.

main.py wires the commands and maps every error to one line (errors.py); each `*_cmd.py` is one command
(or group): it declares its parameters with the shared aliases of params.py, checks values with
options.py, runs the library, and ends with output.py's `emit(doc, as_json, render)`; the renderers in
render/ draw the same document for a person, through textsafe.py; progress.py draws the bars on stderr.
"""

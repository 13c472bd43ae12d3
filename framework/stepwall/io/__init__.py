"""Layer 7, input and output: result tables in the output formats, and writing files, folders
and streams safely. Imports the layers below."""

"""Reports: a TOML report spec -> REPORT.md (or a page FILE.md), one SVG per plot, one CSV per
table.

`stepwall.apps.report.render` runs a report (`Report`, `write`, `write_page`);
`stepwall.apps.report.blocks` holds the block kinds, `placeholders` the prose placeholders, `plots`
the figures.
"""

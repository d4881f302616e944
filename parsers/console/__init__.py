"""Console-log readers built on one engine (:mod:`parsers.console.engine`), one module per format."""

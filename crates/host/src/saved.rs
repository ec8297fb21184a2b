//! Parsers of saved counter text: nstat, Linux/macOS/illumos netstat -s.

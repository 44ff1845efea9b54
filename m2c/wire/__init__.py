"""M2C on the wire: ALC/LCT framing (RFC 5775, RFC 5651) with M2C's fields in
LCT header extensions.  See docs/wire-m2c.md."""

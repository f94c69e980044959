"""xsyn: syntax in cross-lingual transfer."""

__version__ = "0.1.0"

"""The package version (one place; ``greenroute.__version__`` and manifests read it)."""

__version__ = "0.1.0"

"""Several devices and clusters: placement of sweep points, one document from many, Ray actors."""

"""envlock ci: matrix expansion, bake files, parallel builds of the cells, ci init."""

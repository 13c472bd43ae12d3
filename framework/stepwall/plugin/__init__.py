"""Layer 3, plugins: the hook specifications, the registry that loads plugins and checks what
they provide, and the entry types they return. Imports core and spec."""

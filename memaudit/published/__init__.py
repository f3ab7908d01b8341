"""The published code (sora1998/MemProbe), read from a user's checkout: `code` reads templates out of
its source with `ast`, `pack` builds the prompt pack (`memaudit prompts import-published`), `rollout`
reads the rollout roles' request layout, `layout` assembles those requests at run time."""

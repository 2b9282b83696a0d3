"""The HTTP application: its factory and lifespan, serving, the edge, dependencies, the fast
lanes, routers and pages."""

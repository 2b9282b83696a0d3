"""The ecosystem's formats, each a pure view of a signed report body: the in-toto test-result
predicate, Hugging Face's model-index, a CycloneDX ML-BOM (docs/exports.md)."""

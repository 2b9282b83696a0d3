// A local promptfoo provider: echoes the prompt, and fails when the prompt says "boom", so the
// results hold a provider error as promptfoo records one.
class FlakyProvider {
  id() {
    return 'flaky';
  }
  async callApi(prompt) {
    if (prompt.includes('boom')) {
      return { error: 'the flaky provider refused: boom' };
    }
    return { output: prompt };
  }
}
module.exports = FlakyProvider;

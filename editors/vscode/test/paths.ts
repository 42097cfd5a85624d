/** Where the extension is, for the tests that read its files (the tests run from out/test/). */

import * as path from "node:path";

export const extensionRoot = path.resolve(__dirname, "..", "..");

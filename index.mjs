import hyperagent from './index.js';

export const { Agent, HttpAgent, HttpsAgent, constants } = hyperagent;
export default hyperagent;

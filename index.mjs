import hyperagent from './index.js';

export const { Agent, HttpAgent, HttpsAgent, constants, request } = hyperagent;
export default hyperagent;
